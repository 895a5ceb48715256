"""Recipe repositories: git repositories (or bundles, or local clones) whose recipes join
the catalog, cached and pinned by commit (``cmx repo add|list|update|rm``, docs/repos.md)."""
