"""Check, for the launch_pytest tests, whether launch_ros can start this package's nodes."""
import os

PACKAGE = 'soliton_encirclement_ros'


def not_installed_reason(executables):
    """
    Why launch_ros cannot start these nodes here, or None.

    It runs <prefix>/lib/<package>/<executable> from the ament index; without it the include fails
    inside the launch service and launch_pytest waits for ReadyToTest forever. (A skipif mark, not
    a module-level skip: launch_testing's collection hook imports the module and turns a
    module-level skip into 'found no collectors'.)
    """
    from ament_index_python.packages import get_package_prefix
    try:
        prefix = get_package_prefix(PACKAGE)
    except (LookupError, OSError) as error:  # PackageNotFoundError, or AMENT_PREFIX_PATH unset
        return (f'{PACKAGE} is not in the ament index ({error}): colcon build and source '
                'install/setup.bash first')
    missing = [exe for exe in executables
               if not os.access(os.path.join(prefix, 'lib', PACKAGE, exe), os.X_OK)]
    if missing:
        return (f'{PACKAGE} at {prefix} has no lib/{PACKAGE}/{{{", ".join(missing)}}} '
                '(install it with colcon, not pip)')
    return None
