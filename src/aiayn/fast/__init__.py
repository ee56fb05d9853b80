"""The fast paths: the reference model computed in fewer, faster operations."""
