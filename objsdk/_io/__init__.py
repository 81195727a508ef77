"""Reading objects: one resumable, pinned range reader and the file objects on it."""
