"""Built-in families. Each sub-package registers itself in the ``audiocpp.families`` entry-point group."""
