"""Reports people can look at: columns of repeats for ``cmx results compare``, matplotlib
plots (``plots``) and a self-contained HTML page (``html``) for ``cmx results report|plot``.
matplotlib and jinja2 are imported only by the modules that draw or render."""
