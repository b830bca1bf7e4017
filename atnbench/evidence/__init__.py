"""The evidence a run leaves: its identity (run ids and code fingerprints), records moved between
stores, re-runs that verify them and the canary that keeps published runs current."""
