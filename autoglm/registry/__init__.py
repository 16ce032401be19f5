"""The model registry: named models, versions and aliases, kept in a directory or in MLflow."""
