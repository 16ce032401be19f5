"""The ``autoglm`` command line: one module per subcommand, ``main`` gathers them."""
