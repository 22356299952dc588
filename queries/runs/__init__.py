"""Named SQL queries (one .sql file each), read with importlib.resources."""
