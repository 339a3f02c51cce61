//! The scripted fake OpenAI-compatible server (stub; being written).
