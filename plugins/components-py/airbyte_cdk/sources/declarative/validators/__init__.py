from airbyte_cdk.sources.declarative.validators.validation_strategy import ValidationStrategy

__all__ = ["ValidationStrategy"]
