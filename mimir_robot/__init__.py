"""Robot side of mimir without ROS: TidyBot++ RPC link, fakes of its servers, signal contract.

``rpc`` talks to the base and arm servers of a TidyBot++ (or to anything that serves the same
typeids), ``fakes`` provides kinematic stand-ins for tests, ``contract`` lists the topics, frames
and units the robot-side graph publishes. Nothing here imports rclpy or a message package.
"""
