"""Agent memory: long-term memory for chat agents (messages, facts, relationships, goals,
user profiles), built on the extracted knowledge of the conversations an agent has had."""
