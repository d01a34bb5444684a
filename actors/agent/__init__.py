"""agent: built on the kernel in later issues."""
