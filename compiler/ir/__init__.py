"""The Relay intermediate representation: types, expressions, attributes, modules, traversal.

Compiler layer (``compiler.ir``).
"""
