"""Ready-made collections: AT Protocol records, a Gink-style change log, web pages by URL key."""
