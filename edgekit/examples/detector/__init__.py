"""The detector example: a small anchor-free detector for synthetic scenes of three shape classes."""
