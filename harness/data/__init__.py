"""Data the harness handles around the plugins: data files and their checksums, schema-driven encoders,
schema drafts from a user's file, and arrays computed once per dataset and seed."""
