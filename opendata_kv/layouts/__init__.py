"""Ready-made layouts of other systems' keys and values, built from opendata_kv's key model.

`opendata_kv.layouts.opendata`: OpenData's four subsystems (log, timeseries, vector,
keyvalue) as they are today, as Schemas, with decoders for their binary values. Sits above
`values` and below `store`; never imports slatedb.
"""
