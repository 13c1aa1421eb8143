"""Uploaded files as documents: `detect` names a file's format, `parse` reads each format, `source` feeds
parsed files into a KB insert."""
