"""Grammars and schemas shipped with structrag (installed as the ``structrag.grammars``
package): the query language (``query.lark``) and schemas for constrained LLM output."""
