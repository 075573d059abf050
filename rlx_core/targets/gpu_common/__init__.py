"""The GPU kernel renderer shared by every GPU language: loop nests once, a dialect per language."""
