"""The frozen records the store owners return, where an owner module would grow past its size by holding them."""
