"""Settings: the TOML config as one typed object."""
