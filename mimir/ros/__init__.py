"""Thin ROS 2 adapters shared by every node: message conversions, transforms, parameters, QoS.

Only these modules and the node modules import rclpy or message packages; the cores do not.
"""
