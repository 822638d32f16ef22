"""The IR shared by every back end, and the symbolic integers it is built on."""
