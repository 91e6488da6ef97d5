"""The Beam agent framework: a Python port of Riverbeam, knowing nothing of GitHub."""
