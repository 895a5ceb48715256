"""cmx-docker: content-addressed container images from Jinja2 templates, and an executor
that runs a cmx plan inside them. Import-light: heavy modules load inside functions."""

__version__ = "0.1.0"
