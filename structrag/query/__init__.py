"""The query side: parse -> AST -> plan of operator nodes -> ranked results -> context."""
