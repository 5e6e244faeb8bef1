"""The store layer: the only place that talks to slatedb."""
