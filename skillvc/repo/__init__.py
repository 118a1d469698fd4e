"""The skills repository under git: commits, refs, blobs and trailers."""
