from airbyte_cdk.sources.declarative.transformations.config_transformations.config_transformation import ConfigTransformation

__all__ = ["ConfigTransformation"]
