"""The opendata-kv command line: id helpers, key inspection, dump and stats, demo."""
