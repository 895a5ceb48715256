"""cmx-ray: run cmx plans as Ray tasks (see README.md)."""
