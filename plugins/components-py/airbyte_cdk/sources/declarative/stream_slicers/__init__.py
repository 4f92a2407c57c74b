from airbyte_cdk.sources.declarative.stream_slicers.stream_slicer import StreamSlicer

__all__ = ["StreamSlicer"]
