"""The simulation bridge node: the MuJoCo kitchen exposed over ROS."""
