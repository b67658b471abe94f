"""The ``rota`` command line: ``main`` (the app and error convention), ``plan`` (the dry-run
loop and its report), ``render`` (rich tables), ``explain`` (reasons as sentences)."""
