"""Report generators (markdown + matplotlib plots) run by hand or by scripts/, never at runtime."""
