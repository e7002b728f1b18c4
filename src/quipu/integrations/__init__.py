"""Adapters for agent frameworks, each an optional extra importing its framework only when
used: ``quipu.integrations.langgraph`` (``pip install 'quipu-memory[langgraph]'``) and
``quipu.integrations.openai_agents`` (``pip install 'quipu-memory[openai-agents]'``)."""
