"""`python -m opendata_kv` runs the opendata-kv command line."""

from opendata_kv.cli.main import main

raise SystemExit(main())
