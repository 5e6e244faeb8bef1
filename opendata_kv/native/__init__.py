"""The native layer: the only code that touches slatedb's generated module.

binding    the import of the generated module and the version/hash guard
wire       byte layouts crossing the boundary (one row parser)
driver     drives Rust futures: inline for sync callers, via the loop only when pending
calls      the slatedb calls the store makes, awaitable by either face
selfcheck  checks the driver against the generated code before first use
errors     slatedb's exceptions turned into OpendataKvError subclasses
opendata_compat  slatedb extractor and merge-operator objects for OpenData's databases
"""
