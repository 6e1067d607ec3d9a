"""dukb.cli: the `dukb` command."""
