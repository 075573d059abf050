"""ONNX op converters, one function per op, grouped by family; ``table.py`` lists them all."""
