"""The minifier (issue 4). Not implemented yet: nothing here is public API."""
