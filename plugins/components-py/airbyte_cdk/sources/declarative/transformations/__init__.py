from airbyte_cdk.sources.declarative.transformations.transformation import RecordTransformation  # noqa: I001
from airbyte_cdk.sources.declarative.transformations.add_fields import AddFields

__all__ = ["AddFields", "RecordTransformation"]
