"""The ``rota`` command line: ``main`` (the entry point), ``app`` (the Typer app and error
convention), ``fast`` (``rota ps`` and ``rota logs`` without Typer), ``plan`` (the dry-run loop
and its report), ``render`` (rich tables), ``explain`` (reasons as sentences)."""
