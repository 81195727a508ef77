"""Whole-object transfers: parallel parts, multipart uploads, downloads, the writer."""
