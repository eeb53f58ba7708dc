"""edgecli's version, in a module of its own: the package's face (``edgecli.__version__``) and
the modules that record it (the CLI's ``--version``, the resume record, the manifest) read it
here, so that none of them imports the package's ``__init__`` from below."""

__version__ = "0.1.0"
