"""The numpy reference target: the semantic oracle every other backend is checked against.

Importing this package needs nothing beyond the standard library; numpy is imported only by
``semantics`` and ``executor``, which the target loads when it builds a program.
"""
