from airbyte_cdk.utils.traced_exception import AirbyteTracedException


def is_cloud_environment() -> bool:
    # The CDK reads DEPLOYMENT_MODE from the environment; the sandbox has none, so never "cloud".
    return False
