"""Pure building blocks of objsdk: no I/O of their own, no HTTP libraries."""
