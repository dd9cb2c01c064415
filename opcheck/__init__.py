"""The custom-op checker (issue 5). Not implemented yet: nothing here is public API."""
